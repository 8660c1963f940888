"""Hollow member clusters for scale tests (``gpufed sim-fleet``): compact nodes and pods, the real agent."""
