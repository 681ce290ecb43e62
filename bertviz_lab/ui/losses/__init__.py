"""The Losses walkthrough's renderers and stepper."""
