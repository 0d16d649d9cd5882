"""A tiny made-up context the reader tests share: one question, five "Title: sentence" units, two of them gold."""

QUESTION = "What is the capital of Zorbia?"
UNITS = [
    "Zorbia: Zorbia is a small country in the north.",
    "Zorbia: The capital of Zorbia is Plimton.",
    "Wool: Its main export is wool.",
    "Bananas: Bananas are rich in potassium.",
    "Plimton: Plimton lies on a river.",
]
LABELS = [0, 1, 0, 0, 1]
ANSWER = "Plimton"
