"""The browser front end (gradio lives here only; the library never imports ui)."""
