"""The vocabulary the catalogue generator draws from (written by the ragen authors, MIT).

Five top-level categories as in WebShop (beauty, electronics, fashion, food, furniture),
33 product types, each with a category path, the nouns of its name, an attribute pool,
option groups and a price range; plus invented brand names.  Nothing here comes from
WebShop's scraped Amazon data.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BRANDS", "PRODUCT_TYPES", "ProductType", "RESERVED_CLICKS"]

#: Click targets with a fixed meaning; no option value may equal one of them.
RESERVED_CLICKS = ("back to search", "next >", "< prev", "description", "features", "buy now")


@dataclass(frozen=True)
class ProductType:
    """A kind of product.

    Attributes:
        name: the type phrase, also the product's ``query`` (``"running shoes"``).
        category: top-level category.
        path: the category path below the top level (joined by ``" › "``).
        nouns: the nouns of the type phrase (for the type reward).
        attributes: the attribute pool (a product gets 3-5 of them).
        options: option groups (name, values); a product offers 2 or more values of each.
        price: (low, high) dollars.
        suffixes: optional title endings.
    """

    name: str
    category: str
    path: tuple[str, ...]
    nouns: tuple[str, ...]
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    price: tuple[float, float]
    suffixes: tuple[str, ...] = ("",)


_COLORS = ("black", "white", "gray", "navy blue", "red", "pink", "beige", "olive green")
_CLOTH_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_GENDER = ("", "for men", "for women")

PRODUCT_TYPES: tuple[ProductType, ...] = (
    # ---------------------------------------------------------------- beauty
    ProductType("shampoo", "beauty", ("beauty & personal care", "hair care", "shampoo & conditioner"), ("shampoo",),
                ("sulfate free", "paraben free", "cruelty free", "for dry hair", "for curly hair", "tea tree oil",
                 "argan oil", "color safe", "vegan", "natural ingredients"),
                (("size", ("8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz")),
                 ("scent", ("unscented", "lavender", "coconut", "mint", "citrus"))), (5, 35)),
    ProductType("face moisturizer", "beauty", ("beauty & personal care", "skin care", "face"), ("face", "moisturizer"),
                ("hyaluronic acid", "spf 30", "oil free", "fragrance free", "for sensitive skin", "anti aging",
                 "non comedogenic", "vitamin c", "dermatologist tested"),
                (("size", ("1.7 oz", "2.5 oz", "3.4 oz")),), (8, 60)),
    ProductType("lipstick", "beauty", ("beauty & personal care", "makeup", "lips"), ("lipstick",),
                ("long lasting", "matte finish", "cruelty free", "paraben free", "moisturizing", "waterproof",
                 "vegan", "high pigment"),
                (("color", ("ruby red", "nude pink", "berry", "coral", "mauve", "plum")),), (5, 30)),
    ProductType("nail polish", "beauty", ("beauty & personal care", "makeup", "nails"), ("nail", "polish"),
                ("quick dry", "long lasting", "non toxic", "chip resistant", "glossy finish", "vegan"),
                (("color", ("ruby red", "nude pink", "coral", "navy blue", "black", "white")),), (4, 20)),
    ProductType("hair dryer", "beauty", ("beauty & personal care", "hair care", "styling tools"), ("hair", "dryer"),
                ("ionic", "lightweight", "low noise", "fast drying", "cool shot button", "diffuser included",
                 "ceramic", "foldable handle"),
                (("color", ("black", "white", "pink", "rose gold")),), (20, 120)),
    ProductType("electric toothbrush", "beauty", ("beauty & personal care", "oral care", "toothbrushes"),
                ("toothbrush",),
                ("rechargeable", "pressure sensor", "two minute timer", "travel case", "long battery life",
                 "waterproof", "soft bristles"),
                (("color", ("white", "black", "blue", "pink")),), (20, 150)),
    # ----------------------------------------------------------- electronics
    ProductType("wireless earbuds", "electronics", ("electronics", "headphones", "earbud headphones"), ("earbuds",),
                ("noise cancelling", "bluetooth 5.3", "water resistant", "long battery life", "charging case",
                 "touch control", "built in microphone", "fast charging"),
                (("color", ("black", "white", "navy blue", "mint green")),), (15, 200)),
    ProductType("phone case", "electronics", ("electronics", "cell phone accessories", "cases"), ("phone", "case"),
                ("shockproof", "slim fit", "wireless charging compatible", "raised edges", "clear back", "kickstand",
                 "drop protection", "anti scratch"),
                (("color", ("black", "clear", "navy blue", "red", "pink")),
                 ("model", ("iphone 14", "iphone 15", "galaxy s23", "pixel 8"))), (6, 40)),
    ProductType("usb c charger", "electronics", ("electronics", "cell phone accessories", "chargers"),
                ("usb", "charger"),
                ("fast charging", "65w", "gan", "foldable plug", "dual port", "overheat protection", "compact",
                 "travel friendly"),
                (("color", ("white", "black")),), (10, 60)),
    ProductType("bluetooth speaker", "electronics", ("electronics", "portable audio", "speakers"),
                ("bluetooth", "speaker"),
                ("waterproof", "portable", "long battery life", "deep bass", "built in microphone",
                 "stereo pairing", "dustproof", "lightweight"),
                (("color", ("black", "blue", "red", "gray", "green")),), (20, 200)),
    ProductType("hdmi cable", "electronics", ("electronics", "television accessories", "cables"), ("hdmi", "cable"),
                ("4k", "high speed", "braided", "gold plated", "8k", "ethernet support", "flexible"),
                (("length", ("3 ft", "6 ft", "10 ft", "15 ft")),), (5, 30)),
    ProductType("laptop stand", "electronics", ("electronics", "computer accessories", "stands"), ("laptop", "stand"),
                ("adjustable height", "aluminum", "foldable", "ergonomic", "ventilated", "non slip", "portable"),
                (("color", ("silver", "space gray", "black")),), (15, 70)),
    ProductType("wireless mouse", "electronics", ("electronics", "computer accessories", "mice"), ("mouse",),
                ("ergonomic", "silent click", "rechargeable", "bluetooth", "adjustable dpi", "ambidextrous",
                 "long battery life"),
                (("color", ("black", "white", "gray", "pink")),), (10, 80)),
    # --------------------------------------------------------------- fashion
    ProductType("running shoes", "fashion", ("clothing, shoes & jewelry", "shoes", "athletic"), ("running", "shoes"),
                ("lightweight", "breathable", "non slip", "arch support", "memory foam", "shock absorbing",
                 "rubber sole", "machine washable"),
                (("color", ("black", "white", "gray", "navy blue", "red")),
                 ("size", ("7", "8", "9", "10", "11", "12"))), (30, 150), _GENDER),
    ProductType("polo shirt", "fashion", ("clothing, shoes & jewelry", "clothing", "shirts"), ("polo", "shirt"),
                ("short sleeve", "moisture wicking", "regular fit", "100% cotton", "wrinkle free", "machine washable",
                 "quick dry"),
                (("color", _COLORS[:6]), ("size", _CLOTH_SIZES)), (12, 60), _GENDER),
    ProductType("hoodie", "fashion", ("clothing, shoes & jewelry", "clothing", "sweatshirts"), ("hoodie",),
                ("fleece lined", "pullover", "kangaroo pocket", "drawstring hood", "relaxed fit", "machine washable",
                 "soft"),
                (("color", _COLORS), ("size", _CLOTH_SIZES)), (18, 70), _GENDER),
    ProductType("yoga pants", "fashion", ("clothing, shoes & jewelry", "clothing", "activewear"), ("yoga", "pants"),
                ("high waist", "tummy control", "four way stretch", "moisture wicking", "pockets", "squat proof"),
                (("color", ("black", "gray", "navy blue", "olive green", "burgundy")), ("size", _CLOTH_SIZES[:5])),
                (15, 50), ("", "for women")),
    ProductType("winter jacket", "fashion", ("clothing, shoes & jewelry", "clothing", "coats & jackets"),
                ("winter", "jacket"),
                ("waterproof", "hooded", "windproof", "down filled", "packable", "fleece lined", "zip pockets"),
                (("color", ("black", "navy blue", "olive green", "red", "gray")), ("size", _CLOTH_SIZES)),
                (40, 200), _GENDER),
    ProductType("leather wallet", "fashion", ("clothing, shoes & jewelry", "accessories", "wallets"),
                ("leather", "wallet"),
                ("genuine leather", "rfid blocking", "slim", "bifold", "coin pocket", "gift box"),
                (("color", ("black", "brown", "tan")),), (10, 60), ("", "for men")),
    ProductType("sunglasses", "fashion", ("clothing, shoes & jewelry", "accessories", "eyewear"), ("sunglasses",),
                ("polarized", "uv400 protection", "lightweight", "metal frame", "scratch resistant", "unisex"),
                (("color", ("black", "tortoise", "gold", "silver")),), (10, 80)),
    # ------------------------------------------------------------------ food
    ProductType("ground coffee", "food", ("grocery & gourmet food", "beverages", "coffee"), ("coffee",),
                ("medium roast", "dark roast", "organic", "fair trade", "arabica", "low acid", "single origin"),
                (("size", ("12 oz", "24 oz", "2 lb")), ("flavor", ("original", "hazelnut", "vanilla", "caramel"))),
                (6, 30)),
    ProductType("green tea", "food", ("grocery & gourmet food", "beverages", "tea"), ("green", "tea"),
                ("organic", "decaf", "loose leaf", "individually wrapped", "non gmo", "antioxidant rich"),
                (("size", ("20 count", "50 count", "100 count")), ("flavor", ("original", "jasmine", "mint", "lemon"))),
                (4, 25)),
    ProductType("protein bars", "food", ("grocery & gourmet food", "snacks", "nutrition bars"), ("protein", "bars"),
                ("gluten free", "low sugar", "high protein", "keto friendly", "non gmo", "plant based",
                 "individually wrapped"),
                (("flavor", ("chocolate", "peanut butter", "cookies and cream", "almond")),
                 ("size", ("12 count", "24 count"))), (10, 45)),
    ProductType("trail mix", "food", ("grocery & gourmet food", "snacks", "nuts & seeds"), ("trail", "mix"),
                ("no added sugar", "resealable bag", "non gmo", "gluten free", "high protein", "roasted nuts",
                 "snack packs"),
                (("size", ("8 oz", "16 oz", "32 oz")), ("flavor", ("classic", "tropical", "chocolate", "sweet and salty"))),
                (5, 25)),
    ProductType("olive oil", "food", ("grocery & gourmet food", "pantry", "oils"), ("olive", "oil"),
                ("extra virgin", "cold pressed", "organic", "non gmo", "glass bottle", "single origin"),
                (("size", ("500 ml", "750 ml", "1 liter")),), (8, 40)),
    ProductType("dark chocolate", "food", ("grocery & gourmet food", "candy & chocolate", "chocolate bars"),
                ("chocolate",),
                ("70% cacao", "organic", "fair trade", "dairy free", "low sugar", "vegan", "gift box"),
                (("flavor", ("sea salt", "orange", "mint", "raspberry", "original")), ("size", ("3.5 oz", "6 count", "12 count"))),
                (4, 30)),
    # ------------------------------------------------------------- furniture
    ProductType("office chair", "furniture", ("home & kitchen", "furniture", "home office furniture"),
                ("office", "chair"),
                ("ergonomic", "lumbar support", "adjustable height", "breathable mesh", "swivel", "padded armrests",
                 "heavy duty"),
                (("color", ("black", "gray", "white", "blue")),), (60, 300)),
    ProductType("bookshelf", "furniture", ("home & kitchen", "furniture", "living room furniture"), ("bookshelf",),
                ("5 tier", "solid wood", "easy assembly", "industrial style", "space saving", "sturdy", "anti tip"),
                (("color", ("walnut", "white", "black", "oak")),), (30, 180)),
    ProductType("side table", "furniture", ("home & kitchen", "furniture", "living room furniture"),
                ("side", "table"),
                ("solid wood", "storage shelf", "small space", "easy assembly", "modern", "round top"),
                (("color", ("walnut", "white", "black", "oak")),), (25, 120)),
    ProductType("bed sheets", "furniture", ("home & kitchen", "bedding", "sheets & pillowcases"), ("bed", "sheets"),
                ("deep pocket", "microfiber", "breathable", "wrinkle free", "hypoallergenic", "100% cotton", "soft"),
                (("size", ("twin", "full", "queen", "king")), ("color", ("white", "gray", "navy blue", "beige"))),
                (20, 90)),
    ProductType("throw pillow covers", "furniture", ("home & kitchen", "home decor", "decorative pillows"),
                ("pillow", "covers"),
                ("velvet", "set of 2", "hidden zipper", "machine washable", "decorative", "soft"),
                (("size", ("18x18 inch", "20x20 inch")), ("color", ("beige", "gray", "navy blue", "emerald green", "blush pink"))),
                (8, 30)),
    ProductType("desk lamp", "furniture", ("home & kitchen", "lighting", "lamps"), ("desk", "lamp"),
                ("led", "dimmable", "eye caring", "usb charging port", "touch control", "adjustable arm",
                 "energy saving"),
                (("color", ("black", "white", "silver")),), (15, 70)),
    ProductType("storage ottoman", "furniture", ("home & kitchen", "furniture", "living room furniture"),
                ("storage", "ottoman"),
                ("foldable", "faux leather", "padded seat", "large capacity", "living room"),
                (("color", ("black", "brown", "gray", "beige")),), (25, 100)),
)

#: Invented brand names (any resemblance to real brands is accidental).
BRANDS: tuple[str, ...] = (
    "Acornvale", "Brightfold", "Corvana", "Dunmere", "Elmstead", "Fernway", "Glenhollow", "Harbrook", "Ironleaf",
    "Juniper Lane", "Kestrelle", "Larkspur", "Maplecrest", "Northwick", "Oakhaven", "Pinegrove", "Quillby",
    "Redfern", "Stonebridge", "Thistledown", "Umberly", "Valecroft", "Willowmere", "Yarrowby", "Zephyrine",
    "Ashcombe", "Birchley", "Cobalt Peak", "Driftwood & Co", "Emberlyn", "Foxmoor", "Greyhaven", "Hollins",
    "Ivorybay", "Kindlewood", "Lumenor", "Mossgate", "Nettlefield", "Orchard Row", "Plumstead",
)
