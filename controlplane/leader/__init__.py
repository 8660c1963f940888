"""Hub high availability: leader election among hub replicas and fencing of a deposed leader.

``LeaderElector`` decides which replica runs the controllers; ``FencedStore`` makes the
controllers' writes fail once that replica's term is over.
"""

from controlplane.leader.election import LEADER_KEY, LeaderElector, Term, default_identity
from controlplane.leader.fencing import FencedStore
from controlplane.storage.interface import Fenced

__all__ = ["LEADER_KEY", "Fenced", "FencedStore", "LeaderElector", "Term", "default_identity"]
