"""`gpufed up`: the whole federation on one machine, as real processes, in one command.

In: a fleet file (default: the one a previous run used, else the demo fleet shipped in
``gpufed/fleets/demo.yaml``) and a state dir (default ``.gpufed``). Out: a hub with its
embedded etcd (``DIR/hub``), one simulated member cluster per fleet entry
(``DIR/members/<name>``) and one agent joined to the hub per member
(``DIR/agents/<name>``), each supervised (restarted on a crash) with its log in
``DIR/logs/<component>.log``; ``DIR/hub.kubeconfig`` for kubectl; a live one-line
status per component; and, on Ctrl-C or SIGTERM, agents, then members, then the hub
stopped cleanly. Started again on the same DIR it resumes: the hub keeps its etcd data,
members restore their snapshot, agents reuse their stored credential, and every
component comes back on the port it had (remembered in ``DIR/up.json``) when it is free.

One module per concern:

- ``command``: the arguments, and starting, waiting for and stopping the components;
- ``layout``: the files of the state dir, its lock, the fleet file copied into it;
- ``ports``: every component's port, remembered across runs, a free one when taken;
- ``polling``: what the hub and the members answer over HTTP (readiness, the Cluster objects);
- ``board``: the live status table and the messages above it.
"""

from gpufed.commands.up.command import add_arguments, run

__all__ = ["add_arguments", "run"]
