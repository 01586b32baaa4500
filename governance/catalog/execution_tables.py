"""Apply executions, per-action results and the apply lock (filled in by apply)."""
