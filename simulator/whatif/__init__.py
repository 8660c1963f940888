"""What-if replay: GPU job traces against a simulated fleet, one run per placement strategy.

``trace`` reads jobs, ``fleetsplit`` turns the Alibaba node list into a fleet file,
``member`` is one simulated member (scheduler, GPU sharing, the agent's report),
``strategies`` places jobs (gpufed's hub scheduler and three baselines), ``engine`` runs the
fill and replay passes, ``metrics`` holds the results and ``plot`` draws them; ``quotas``
admits jobs through Kueue quotas with the hub's admission core and ``tenants`` assigns
synthetic tenants and sums per-tenant figures (Jain's fairness index). The
``gpufed whatif`` command (gpufed/commands/whatif.py) is the user's way in; see docs/whatif.md.
"""
