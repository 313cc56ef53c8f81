"""Where and how tools run: workers, loops, offloading, isolation, deadlines."""
