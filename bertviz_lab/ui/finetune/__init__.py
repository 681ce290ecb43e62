"""The Fine-tune page: the run form and live panel, and what a finished run learned."""
