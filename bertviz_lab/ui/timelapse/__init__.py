"""The Time-lapse page: the player, the role chart, the diff, and syntax as it forms."""
