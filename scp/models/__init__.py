"""Value networks: Deep Sets and its convex variant, the context-conditioned encoder, the pointwise controls, the
game a network plays on one context, the config that describes a network, and verified checkpoints.
"""
