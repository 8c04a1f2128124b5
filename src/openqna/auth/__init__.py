"""Who may call: API keys and their roles, and bearer tokens from an identity provider."""
