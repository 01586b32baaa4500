"""Classification: objects -> artifacts -> runs."""
