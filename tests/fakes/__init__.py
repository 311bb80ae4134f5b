"""Fakes of the services Threadline talks to, over real protocols, for tests and benchmarks."""
