"""smug-opt: minimal-mask explanations of neural networks, on any exact solver."""
