"""Where state lives: backends (memory, LangGraph store, Postgres) and graph state."""
