"""Knowledge bases with state of their own: typed tables, OpenAI files and vector stores."""
