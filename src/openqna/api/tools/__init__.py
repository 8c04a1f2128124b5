"""Knowledge bases as LLM tools: MyScale's get_related, the GPT Actions OpenAPI, and MCP."""
