from infercourse.pages import PageValues
P = PageValues("facts.md")
