"""The guided Lesson: its steps in one list (steps.py), each step's question and the numbers it draws (questions.py,
head_steps.py, vector_steps.py, why_step.py), and the class's two live runs, the tiny training run and the probes
(runs.py)."""
