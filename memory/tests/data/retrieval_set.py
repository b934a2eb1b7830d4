"""A small labelled retrieval set: memories of one support agent and queries whose
relevant memory is known. Some queries hinge on an exact token (error codes,
invoice numbers, code names) that embeddings blur; others paraphrase the memory
with no word in common, which full text cannot match. Distractors share words or
near-identical identifiers with the queries."""

MEMORIES = {
    "err4471": "Checkout fails with error ERR-4471 when the coupon field is left empty.",
    "err4417": "Checkout fails with error ERR-4417 when the shipping address exceeds 120 characters.",
    "err5512": "Checkout fails with error ERR-5512 when the card is declined by the bank.",
    "err4470": "Login fails with error ERR-4470 after three wrong passwords in a row.",
    "inv20931": "Customer disputed invoice INV-20931 because they were billed twice in May.",
    "inv77310": "Customer disputed invoice INV-77310 over a late payment fee.",
    "inv20913": "Customer paid invoice INV-20913 by bank transfer in April.",
    "zephyr": "Project Zephyr moves the billing database to PostgreSQL before the third quarter.",
    "atlas": "Project Atlas moves the search cluster to new hardware before the third quarter.",
    "borealis": "Project Borealis moves the reporting jobs to a nightly schedule.",
    "coffee": "Always starts the day with a flat white from the cafe downstairs.",
    "callback": "The customer would like a callback tomorrow about the renewal.",
    "whatsapp": "While abroad she prefers WhatsApp messages over phone calls.",
    "travel_team": "The travelling sales team reached its targets early this year.",
    "cats": "Allergic to cats, so on-site visits must avoid homes with animals.",
    "vegetarian": "Eats no meat; book vegetarian options for team lunches.",
    "timezone": "Works from Auckland, so meetings must be early in the European morning.",
    "meeting_room": "Meeting room B is booked every Monday for the team standup.",
    "dark_mode": "Uses the dashboard in dark mode and finds the light theme too bright.",
    "theme_bug": "A bug in the theme switcher resets the dashboard colors after logout.",
    "order5531": "Order 5531 arrived two weeks late and the shipping cost was refunded.",
    "order5513": "Order 5513 was cancelled before shipping at the customer's request.",
    "password": "Resets the account password through the self-service portal, never by phone.",
    "language": "Prefers to be addressed in German in all written communication.",
    "budget": "Has to get any purchase above five thousand euros approved by finance.",
    "churn": "Mentioned evaluating a competitor if response times do not improve.",
}

# (query, relevant memory keys)
QUERIES = [
    ("ERR-4471", {"err4471"}),
    ("what does ERR-5512 mean", {"err5512"}),
    ("invoice INV-20931", {"inv20931"}),
    ("INV-20913", {"inv20913"}),
    ("Zephyr", {"zephyr"}),
    ("status of Borealis", {"borealis"}),
    ("what coffee do they drink each morning", {"coffee"}),
    ("how to contact her when she travels overseas", {"whatsapp"}),
    ("pets allergy before visiting", {"cats"}),
    ("dietary restrictions for catering", {"vegetarian"}),
    ("which time of day suits calls given where they live", {"timezone"}),
    ("spending limit that needs sign-off", {"budget"}),
    ("risk of the client leaving for another vendor", {"churn"}),
    ("late delivery refund for order 5531", {"order5531"}),
]
