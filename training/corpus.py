"""The reference model's training corpus, generated deterministically by our own code.

Nothing is downloaded: documents are assembled from Faker (each locale its own instance,
seeded with ``seed_instance``) and templates, with every choice drawn from one
``random.Random(seed)``. The same seed and Faker version give the same documents.

Two kinds of document:

* plain text (``str``): faker paragraphs, short biographies and facts, lists, letters,
  a little French / German / Spanish / Italian / Polish text and some emoji, so multi-byte
  tokens exist. Training appends ``<|endoftext|>`` to each.
* :class:`Chat`: short question/answer dialogues (1–3 turns, sometimes a system message),
  rendered by :meth:`Tokenizer.render_chat` and followed by ``<|endoftext|>``. Answers are
  1–3 sentences and relate to the question, so served replies are short, end with
  ``<|im_end|>`` on their own, and look sensible.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from faker import Faker

__all__ = ["Chat", "CorpusWriter", "Document", "training_text"]

Message = tuple[str, str]  # (role, content)
_T = TypeVar("_T")


@dataclass(frozen=True)
class Chat:
    """A dialogue: optional system message, then alternating user / assistant turns."""

    messages: tuple[Message, ...]


Document = str | Chat

# Real capitals make "What is the capital of X?" answers look right.
_CAPITALS = {
    "France": "Paris", "Germany": "Berlin", "Spain": "Madrid", "Italy": "Rome", "Portugal": "Lisbon",
    "Poland": "Warsaw", "Sweden": "Stockholm", "Norway": "Oslo", "Finland": "Helsinki", "Denmark": "Copenhagen",
    "Austria": "Vienna", "Greece": "Athens", "Ireland": "Dublin", "Belgium": "Brussels",
    "the Netherlands": "Amsterdam", "Hungary": "Budapest", "Czechia": "Prague", "Romania": "Bucharest",
    "Turkey": "Ankara", "Egypt": "Cairo", "Kenya": "Nairobi", "Nigeria": "Abuja", "Morocco": "Rabat", "Ghana": "Accra",
    "Ethiopia": "Addis Ababa", "Japan": "Tokyo", "China": "Beijing", "India": "New Delhi", "Thailand": "Bangkok",
    "Vietnam": "Hanoi", "Indonesia": "Jakarta", "South Korea": "Seoul", "Iran": "Tehran", "Canada": "Ottawa",
    "the United States": "Washington", "Mexico": "Mexico City", "Brazil": "Brasília", "Argentina": "Buenos Aires",
    "Chile": "Santiago", "Peru": "Lima", "Colombia": "Bogotá", "Australia": "Canberra", "New Zealand": "Wellington",
    "Iceland": "Reykjavík", "Switzerland": "Bern", "Ukraine": "Kyiv", "Cuba": "Havana",
}  # fmt: skip
_FOREIGN = ("fr_FR", "de_DE", "es_ES", "it_IT", "pl_PL")
_LANGUAGE = {"fr_FR": "French", "de_DE": "German", "es_ES": "Spanish", "it_IT": "Italian", "pl_PL": "Polish"}
_EMOJI = (
    "😀", "😂", "😊", "😉", "😎", "🤔", "👍", "👋", "🙏", "🎉", "✨", "🔥", "🌍",
    "🌞", "🌧️", "❄️", "🍕", "☕", "📚", "🚀", "❤️", "💡", "✅", "🐍", "🐱", "🎵",
)  # fmt: skip
_WEATHER = ("sunny", "cloudy", "rainy", "windy", "foggy", "snowy", "warm", "cold", "mild")
_SYSTEM = (
    "You are a helpful assistant.",
    "You are a concise assistant. Answer briefly.",
    "You are terse.",
    "Answer in one or two sentences.",
    "You are a friendly assistant who likes short answers.",
)
_TOPIC_QUESTIONS = (
    ("What is {}?", "is"), ("Tell me about {}.", "is"), ("Describe {}.", "is"), ("Explain {}.", "is"),
    ("What do you know about {}?", "is"), ("Write a sentence about {}.", "is"), ("How does {} work?", "works by"),
    ("Why is {} important?", "matters because"), ("What are the benefits of {}?", "helps"),
)  # fmt: skip
_GREETINGS = ("Hi", "Hello", "Hey", "Hello there", "Good morning", "Hi, how are you?")
_THANKS = ("Thanks!", "Thank you.", "Great, thanks.", "Cool.", "OK, thank you!")


class CorpusWriter:
    """Yields documents; all randomness comes from the seed given here."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.en = Faker("en_US")
        self.en.seed_instance(seed)
        self.foreign = {loc: Faker(loc) for loc in _FOREIGN}
        for offset, fake in enumerate(self.foreign.values(), start=1):
            fake.seed_instance(seed + offset)
        self._plain: list[tuple[Callable[[], str], int]] = [
            (self._paragraph, 6), (self._bio, 3), (self._capital_fact, 2), (self._list, 2),
            (self._letter, 1), (self._foreign_text, 2), (self._emoji_post, 1), (self._company, 2),
        ]  # fmt: skip
        self._turns: list[tuple[Callable[[], Message], int]] = [
            (self._ask_capital, 3), (self._ask_place, 2), (self._ask_person, 4), (self._ask_company, 2),
            (self._ask_weather, 2), (self._ask_generic, 4), (self._ask_topic, 8), (self._ask_list, 2),
            (self._ask_math, 2), (self._ask_foreign, 2), (self._ask_emoji, 1), (self._ask_count, 1),
            (self._ask_repeat, 2), (self._ask_summary, 2), (self._greeting, 2), (self._ask_identity, 1),
            (self._ask_poem, 1),
        ]  # fmt: skip

    def documents(self, count: int, chat_share: float = 0.6) -> Iterator[Document]:
        """``count`` documents, about ``chat_share`` of them dialogues."""
        for _ in range(count):
            yield self.chat() if self.rng.random() < chat_share else self._pick(self._plain)()

    def chat(self) -> Chat:
        """One dialogue of 1–3 turns, a system message about a third of the time."""
        messages: list[Message] = []
        if self.rng.random() < 0.35:
            role = "developer" if self.rng.random() < 0.2 else "system"  # same template
            messages.append((role, self.rng.choice(_SYSTEM)))
        turns = self.rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        for turn in range(turns):
            if turn and self.rng.random() < 0.3:
                question, answer = self.rng.choice(_THANKS), self._welcome()
            else:
                question, answer = self._pick(self._turns)()
            messages += [("user", question), ("assistant", answer)]
        return Chat(tuple(messages))

    # -- helpers ---------------------------------------------------------------------------

    def _pick(self, table: Sequence[tuple[Callable[[], _T], int]]) -> Callable[[], _T]:
        """A generator from ``(generator, weight)`` pairs."""
        return self.rng.choices([f for f, _ in table], weights=[w for _, w in table])[0]

    def _sentences(self, low: int = 1, high: int = 3) -> str:
        return " ".join(self.en.sentence(nb_words=self.rng.randint(4, 11)) for _ in range(self.rng.randint(low, high)))

    def _person(self) -> tuple[str, str]:
        """A full name (a fifth of them non-English, with accents) and its pronoun."""
        fake = self.foreign[self.rng.choice(_FOREIGN)] if self.rng.random() < 0.2 else self.en
        female = self.rng.random() < 0.5
        return (fake.name_female() if female else fake.name_male()), ("She" if female else "He")

    def _place(self) -> str:
        return self.rng.choice(list(_CAPITALS.values())) if self.rng.random() < 0.3 else self.en.city()

    def _noun(self) -> str:
        return self.en.word(part_of_speech="noun")

    def _welcome(self) -> str:
        welcome = self.rng.choice(("You're welcome!", "Happy to help.", "No problem!", "Glad I could help."))
        return welcome + (" " + self.rng.choice(_EMOJI) if self.rng.random() < 0.2 else "")

    # -- plain documents -------------------------------------------------------------------

    def _paragraph(self) -> str:
        # Long enough that a completion prompt gets a few sentences before <|endoftext|>.
        count = self.rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        return "\n\n".join(self.en.paragraph(nb_sentences=self.rng.randint(3, 8)) for _ in range(count))

    def _bio(self) -> str:
        name, pronoun = self._person()
        text = f"{name} is a {self.en.job().lower()} who lives in {self._place()}. "
        text += f"{pronoun} works at {self.en.company()}, where the team tries to {self.en.bs()}. "
        return text + self._sentences(1, 4)

    def _capital_fact(self) -> str:
        country, city = self.rng.choice(list(_CAPITALS.items()))
        return f"{city} is the capital of {country}. " + self._sentences(2, 5)

    def _company(self) -> str:
        company = self.en.company()
        return f'{company} is a company that helps clients {self.en.bs()}. Its motto is "{self.en.catch_phrase()}".'

    def _list(self) -> str:
        items = [
            self.rng.choice((self.en.word, self.en.color_name, self.en.city, self._noun))()
            for _ in range(self.rng.randint(3, 6))
        ]
        title = self.rng.choice(("Shopping list", "Things to do", "Notes", "Ideas", "Places to visit"))
        bullet = self.rng.choice(("- ", "* ", ""))
        lines = [f"{bullet or f'{i}. '}{item}" for i, item in enumerate(items, 1)]
        return f"{title}:\n" + "\n".join(lines)

    def _letter(self) -> str:
        return f"Dear {self._person()[0]},\n\n{self._paragraph()}\n\nBest regards,\n{self._person()[0]}"

    def _foreign_text(self) -> str:
        fake = self.foreign[self.rng.choice(_FOREIGN)]
        return fake.paragraph(nb_sentences=self.rng.randint(2, 6))

    def _emoji_post(self) -> str:
        emoji = self.en.emoji() if self.rng.random() < 0.3 else self.rng.choice(_EMOJI)
        return f"{self._sentences(1, 4)} {emoji}"

    # -- chat turns: (question, answer) ------------------------------------------------------

    def _ask_capital(self) -> Message:
        country, city = self.rng.choice(list(_CAPITALS.items()))
        question = self.rng.choice(("What is the capital of {}?", "Which city is the capital of {}?", "Capital of {}?"))
        answer = f"The capital of {country} is {city}."
        if self.rng.random() < 0.5:
            answer += " " + self._sentences(1, 1)
        return question.format(country), answer

    def _ask_place(self) -> Message:
        country, capital = self.rng.choice(list(_CAPITALS.items()))
        if self.rng.random() < 0.4:
            name = country.removeprefix("the ")
            return f"Tell me about {name}.", f"{name} is a country whose capital is {capital}. {self._sentences(1, 1)}"
        if self.rng.random() < 0.5:
            place = self.en.city()  # a made-up town: claim no country for it
            answer = f"{place} is a town with {self.rng.randint(2, 90)},000 people."
        else:
            place, answer = capital, f"{capital} is the capital of {country}."
        question = self.rng.choice(("Tell me about {}.", "Tell me about the city of {}.", "What is {} like?"))
        return question.format(place), f"{answer} {self._sentences(1, 1)}"

    def _ask_person(self) -> Message:
        name, pronoun = self._person()
        question = self.rng.choice(("Tell me about {}.", "Who is {}?", "What does {} do?", "Where does {} live?"))
        answer = f"{name} is a {self.en.job().lower()} who lives in {self._place()}."
        if self.rng.random() < 0.6:
            answer += f" {pronoun} works at {self.en.company()}."
        return question.format(name), answer

    def _ask_company(self) -> Message:
        company = self.en.company()
        question = self.rng.choice(("What does {} do?", "Tell me about {}.", "What is {}?"))
        return question.format(company), f"{company} is a company that helps clients {self.en.bs()}."

    def _ask_weather(self) -> Message:
        city = self._place()
        question = self.rng.choice(("What's the weather like in {}?", "Is it cold in {} today?", "Weather in {}?"))
        weather, degrees = self.rng.choice(_WEATHER), self.rng.randint(-5, 32)
        return question.format(city), f"It is {weather} in {city} today, around {degrees} degrees."

    def _ask_generic(self) -> Message:
        # Arbitrary questions still get a short answer that ends: served prompts are arbitrary.
        question = self.en.sentence(nb_words=self.rng.randint(3, 9))[:-1] + self.rng.choice(("?", "?", ".", "!"))
        if self.rng.random() < 0.3:
            question = self.rng.choice(("Can you explain ", "Why ", "How do I ", "What about ")) + question.lower()
        return question, self._sentences(1, 3)

    def _ask_topic(self) -> Message:
        # The answer restates the question's subject. Copying it is what makes replies to real
        # prompts look related ("What is machine learning?" → "Machine learning is …").
        noun = self._noun()
        article = "an" if noun[0] in "aeiou" else "a"
        subject = self.rng.choice((f"{article} {noun}", f"the {noun}", " ".join(self.en.words(2))))
        if self.rng.random() < 0.4:
            subject = " ".join(self.en.words(self.rng.randint(1, 3)))
        question, verb = self.rng.choice(_TOPIC_QUESTIONS)
        tail = self.en.sentence(nb_words=self.rng.randint(4, 9))
        answer = f"{subject[0].upper()}{subject[1:]} {verb} {tail[0].lower()}{tail[1:]}"
        return question.format(subject), answer + (" " + self._sentences(1, 2) if self.rng.random() < 0.4 else "")

    def _ask_list(self) -> Message:
        n = self.rng.randint(2, 5)
        kind, make = self.rng.choice(
            (("colors", self.en.color_name), ("cities", self.en.city), ("words", self.en.word))
        )
        items = [make() for _ in range(n)]
        return f"Name {n} {kind}.", f"Here are {n} {kind}: {', '.join(items[:-1])} and {items[-1]}."

    def _ask_math(self) -> Message:
        a, b = self.rng.randint(0, 20), self.rng.randint(0, 20)
        op, value = self.rng.choice((("+", a + b), ("-", a - b), ("*", a * b)))
        return f"What is {a} {op} {b}?", f"{a} {op} {b} = {value}."

    def _ask_foreign(self) -> Message:
        locale = self.rng.choice(_FOREIGN)
        sentence = self.foreign[locale].sentence(nb_words=self.rng.randint(4, 9))
        return f"Say something in {_LANGUAGE[locale]}.", f"Sure: {sentence}"

    def _ask_emoji(self) -> Message:
        noun = self._noun()
        emoji = self.rng.choice(_EMOJI)
        return f"Give me an emoji for {noun}.", f"How about {emoji} for {noun}?"

    def _ask_count(self) -> Message:
        n = self.rng.randint(3, 10)
        return f"Count to {n}.", ", ".join(str(i) for i in range(1, n + 1)) + "."

    def _ask_repeat(self) -> Message:
        sentence = self.en.sentence()
        return f"Repeat after me: {sentence}", sentence

    def _ask_summary(self) -> Message:
        sentences = [self.en.sentence(nb_words=self.rng.randint(5, 10)) for _ in range(self.rng.randint(3, 5))]
        return "Summarize this: " + " ".join(sentences), f"In short: {sentences[0]}"

    def _greeting(self) -> Message:
        answer = self.rng.choice(
            ("Hello! How can I help you today?", "Hi! What can I do for you?", "Hello, nice to meet you.")
        )
        return self.rng.choice(_GREETINGS), answer + (" " + self.rng.choice(_EMOJI) if self.rng.random() < 0.3 else "")

    def _ask_identity(self) -> Message:
        question = self.rng.choice(("What is your name?", "Who are you?", "Are you a real model?"))
        return question, "I am a small reference model that answers test requests. My replies are short."

    def _ask_poem(self) -> Message:
        noun = self._noun()
        lines = [self.en.sentence(nb_words=self.rng.randint(3, 5)) for _ in range(3)]
        return f"Write a short poem about {noun}.", "\n".join(lines)


def training_text(doc: Document) -> str:
    """The document as plain text, for training the tokenizer (specials are added later)."""
    if isinstance(doc, str):
        return doc
    return "".join(f"{role}\n{content}\n" for role, content in doc.messages)
