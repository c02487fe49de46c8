"""Clusters the suite runs against: our embedded control plane or the user's."""
