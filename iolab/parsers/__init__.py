"""Pure parsers of raw tool output: each is a function of file contents and never runs a tool.

Responsible for: turning one output format into numbers, with a clear error naming the source
for malformed input; an error quotes at most a bounded excerpt of the input it could not read
(:func:`iolab.errors.excerpt`, :func:`iolab.errors.shortened`), however long the line.
Not responsible for: finding or running tools, or which files a run has (``iolab.tools``).
"""
