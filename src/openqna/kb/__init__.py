"""The use cases: a knowledge base written, asked, searched, authored, deployed, logged and migrated."""
