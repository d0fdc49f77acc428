"""Who may do what and how much: the authorizer's operation tables, client quotas and
delegation tokens."""
