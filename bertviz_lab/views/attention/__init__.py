"""The Attention page's numbers: every head of one traced forward pass, the rest of the layer, long inputs."""
