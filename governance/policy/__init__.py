"""The retention policy language: typed models, YAML loading with positioned errors, units.

>>> from governance.policy import load_policy
>>> policy = load_policy("policies/retention.yaml")  # doctest: +SKIP
>>> [r.name for r in policy.rules]  # doctest: +SKIP
['failed-runs', 'residue', 'checkpoints', 'logs', 'datasets']
"""

from governance.policy.loader import load_policy, load_policy_text
from governance.policy.models import Policy

__all__ = ["Policy", "load_policy", "load_policy_text"]
