"""The task benchmark's parts (`bench.bench_tasks` runs them).

- `core`: tasks, actions, the environment, domains and their tools;
- `telecom`, `banking`: τ²-bench's tasks on tools of our own (data read at run time by
  `data`); `synthetic`: 3 tasks of our own for the smoke test;
- `agents`: the scripted ``blind`` and ``careful`` agents (chat models);
- `arms`: ``toolnode``, ``langchain``, ``ours``, ``ours_docs``;
- `run`: one episode under one fault, and the summary per cell; `kit`: the fault kit;
- `crash`: a process killed after a write, then resumed.
"""
