"""The planner: policy + catalog snapshot + as_of -> a saved, fingerprinted plan."""
