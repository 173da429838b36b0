"""Choosing a configuration: search spaces, the exact optimizer (with and without catch-up),
the landscape around a choice, the recommendation and its plain-language parts."""
