"""Pure parsers of raw tool output; each is a function of file contents, never runs tools."""
