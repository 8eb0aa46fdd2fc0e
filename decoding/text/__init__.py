"""Text knowledge shared by every front-end: the regex engine, Unicode/UTF-8 ranges, XML names."""
