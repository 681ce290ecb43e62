"""The widget kit every page draws with: widgets and charts, tables, run forms, the sentence that follows you, the run pages' library."""
