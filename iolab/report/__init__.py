"""What the book's notebooks share: the chapter context (what ran, summaries, glue), figure
style and helpers, tables, published reference values, and rendering the book.

Responsible for: presentation, the same way in every chapter.
Not responsible for: the numbers (experiments' analysis functions, ``iolab.analysis``).
"""
