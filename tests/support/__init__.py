"""Helpers the test files share, one home each (fixtures are in `tests/conftest.py`):

- `answers`: a step's tool answers by call id, an error answer's envelope;
- `calls`: a `Call` made by hand, for the stages' pure cores;
- `graphs`: the graph of a tools node alone (START -> tools -> END);
- `net`: a free localhost port for a throwaway server;
- `storage`: connections to LangGraph's SQLite and PostgreSQL checkpointers and stores.
"""
