"""Approval and audit tables (filled in by the approval workflow)."""
