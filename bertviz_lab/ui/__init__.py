"""The only Streamlit code outside app.py and pages/, in three kinds of folder: one per page feature (attention/,
finetune/, lesson/, losses/, predict/, pretrain/, representations/, syntax/, timelapse/, why/, worked/: what
that page draws beyond its page file), kit/ (the widgets, tables, run forms and run pages every page draws with)
and shell/ (the app around the pages: the router and its menu, session state, links and sharing, the projector and
classroom, turns, work done once, the server, the model picker, the handout). Arrows point down: lesson -> the
page features -> kit -> shell (pyproject.toml's contract)."""
