"""Iteration-level simulation of a serving replica (tokenmath.simulate); see simulate.py for the map."""
