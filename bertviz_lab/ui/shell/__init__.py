"""The app's shell: the router, session state and its checks, links and sharing, the projector and classroom, turns
and work done once, the server, the model picker, the handout, and typed text drawn as typed (text.py)."""
