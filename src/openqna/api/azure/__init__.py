"""Azure AI Language question answering: runtime and authoring routes, and their wire conventions."""
