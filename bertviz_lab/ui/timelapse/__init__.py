"""The Time-lapse page: the player, the role chart and the diff (player.py), and syntax as it forms (syntax.py)."""
