from infercourse.pages import PageValues
P = PageValues("notation.md")
