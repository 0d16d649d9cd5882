"""Value networks: Deep Sets and its convex variant, the context-conditioned encoder, the pointwise controls, the
game a network plays on one context, the one batched scorer of many contexts, the config that describes a network,
and verified checkpoints.
"""
