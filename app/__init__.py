"""Programs built on the qwen package: the terminal chat (app/chat.py, python main.py chat)."""
