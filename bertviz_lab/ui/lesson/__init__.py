"""The Lesson page: the stepper, predict-then-reveal and the class's live runs (stepper.py), and how each step draws,
one renderer bound to each step's id (steps.py)."""
