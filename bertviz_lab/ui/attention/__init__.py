"""The Attention page's cached forward passes and its sections."""
