"""Verbs with the phrases they take, and the other fixed tables of the world.

A verb class maps each verb to the templates of what may follow it, so that
people eat food and deposit money, and never deposit a river. In verb specs
"eat:ate" gives an irregular past and "stop*" a doubled final consonant.
Template slots ({fruit:pl}, {a:thing}, ...) are filled by `Writer.fill`.
"""

# --- verb classes: verb spec -> templates of what follows it ------------------
_ANIMAL_MOTION = "walk run:ran* jump climb crawl hurry wander rush race"
MOTION = {v: ("to the {town}", "across the {nature}", "along the {nature}", "into the {nature}",
              "around the {town}", "through the {nature}")
          for v in (_ANIMAL_MOTION + " dance stroll march skip* jog* swim:swam*").split()}
ANIMAL_MOTION = {v: ("into the {room}", "around the {room}", "across the {room}",
                      "under the {seat}") for v in _ANIMAL_MOTION.split()}
_WHERE = ("under the {seat}", "near the {seat}", "in the {room}", "behind the {seat}",
          "on the {seat}", "in the {nature}")
_ANIMAL_REST = "sleep:slept rest wait hide:hid stay play stand:stood stretch yawn nap*"
REST = {v: _WHERE for v in (_ANIMAL_REST + " relax smile laugh cry sing:sang shout listen "
                            "sneeze cheer").split()}
ANIMAL_REST = {v: _WHERE for v in _ANIMAL_REST.split()}
SIT = {"sit:sat*": ("on the {seat}",)}
_ANY_FOOD = ("{a:fruit}", "some {fruit:pl}", "{a:dish}", "some {dish:pl}", "the {mass_food}",
             "some {mass_food}")
FOOD = {v: _ANY_FOOD for v in "eat:ate taste share order finish enjoy smell serve try want".split()}
FOOD.update({"cook": ("some {mass_food}", "the {mass_food}", "{num:dish}"),
             "bake": ("{a:baked}", "some {baked:pl}", "bread"),
             "slice": ("{a:fruit}", "the bread", "the cheese", "the {baked}")})
DRINK = {"drink:drank": ("a cup of {drink}", "a glass of {drink}"), "sip*": ("{poss} {drink}",),
         "pour": ("some {drink} into {a:kitchenware}",), "spill": ("the {drink} on the {seat}",)}
HANDLE = {v: ("{a:thing}", "the {thing}", "{poss} {thing}", "{num:thing}", "the {thing:pl}",
              "{a:kitchenware}", "the {kitchenware:pl}", "{a:paper}", "{poss} {paper:pl}",
              "{a:toy}", "the {toy:pl}")
          for v in ("buy:bought find:found lose:lost carry hold:held drop* clean fix sell:sold "
                    "borrow need keep:kept use forget:forgot* pack wrap* lift check "
                    "bring:brought take:took move").split()}
OPEN = {v: ("the {openable}", "{poss} {openable}", "the {openable:pl}")
        for v in "open close lock unlock shut:shut*".split()}
WEAR = {"wear:wore": ("{a:color} {clothes}", "{poss} {color} {clothes:pl}", "{poss} new {clothes}"),
        "buy:bought": ("{a:color} {clothes}", "{num:clothes}"),
        "wash": ("{poss} {clothes:pl}",), "lose:lost": ("{poss} {clothes}",)}
PERCEIVE = {v: ("{a:atrait} {wild}", "the {farm:pl}", "{a:small}", "{num:small}", "{a:role}",
                "the {role:pl}", "{poss} {kin}", "{a:water}", "the {water:pl}", "the {pet:pl}")
            for v in ("see:saw watch notice hear:heard meet:met follow chase feed:fed help call "
                      "greet hug* pet* photograph scare").split()}
STUDY = {v: ("{field}",) for v in ("study learn teach:taught love like enjoy discuss explain "
                                   "practice understand:understood").split()}
READ = {"read:read": ("{a:readable}", "the {readable:pl}"), "write:wrote": ("{a:readable}",),
        "draw:drew": ("a picture", "a map", "{a:atrait} {wild}")}
TECH = {v: ("{a:dtrait} {device}", "a new {device}", "{num:device}") for v in
        "release announce launch design build:built test show sell:sold present introduce".split()}
MONEY = {"deposit": ("money", "{num} dollars", "{poss} salary", "some cash"),
         "withdraw:withdrew": ("cash", "{num} euros", "some money"),
         "save": ("money", "{num} dollars"), "spend:spent": ("{num} dollars on {a:thing}",),
         "borrow": ("money from the bank",), "pay:paid": ("the bill", "for {a:thing}"),
         "count": ("the money", "the coins", "the cash"), "earn": ("{num} dollars", "money"),
         "lend:lent": ("{poss} {kin} some money",), "send:sent": ("money to {poss} {kin}",)}
SPORT = {v: ("{sport}",) for v in "play practice watch love".split()}
MUSIC = {v: ("the {instrument}",) for v in "play practice".split()}
COMPETE = {v: ("the match", "the game") for v in "win:won* lose:lost".split()}
HIT = {"hit:hit*": ("the ball with {poss} bat", "the ball with a bat")}
GARDEN = {"plant": ("{flower:pl}", "{num:tree}"), "water": ("the {flower:pl}", "the {tree}"),
          "grow:grew": ("{dish:pl}", "{fruit:pl}"), "pick": ("some {fruit:pl}", "{a:flower}"),
          "dig:dug*": ("a hole near the {tree}",), "trim*": ("the {tree:pl}",),
          "cut:cut*": ("the grass", "some {flower:pl}")}
_BODY_VERBS = "lick scratch wash hurt:hurt shake:shook rub* raise touch".split()
BODY = {v: ("{poss} {abody}", "{poss} {apair}", "{poss} {apair:pl}") for v in _BODY_VERBS}
HUMAN_BODY = {v: ("{poss} {hbody}", "{poss} {hpair}", "{poss} {hpair:pl}") for v in _BODY_VERBS}
TRAVEL = {v: ("to {city}", "from {city} to {city}") for v in
          "travel fly:flew drive:drove sail return move".split()}
RIDE = {"ride:rode": ("{poss} {ride} to the {town}",)}
TALK = {v: ("to {a:role}", "to {poss} {kin}", "with {poss} {kin}") for v in
        "talk speak:spoke chat* whisper".split()}
LIGHT = {"light:lit": ("a match", "a candle", "the lamp", "a fire")}
FARM_WORK = {v: ("the {farm:pl}",) for v in "feed:fed milk brush count".split()}
GO = {"go:went": ("to the {town}",)}
CROSS = {"cross": ("the street", "the road", "the bridge", "the river")}
# Verbs whose subject is the weather ("it rained", "the sun shone"); the weather
# story gives each its own sentence, so they have no templates here.
WEATHER_VERBS = "rain snow shine:shone blow:blew freeze:froze"

# --- the places people go, and what they go there to do ------------------
TOWN = {
    "bank": ("deposit money", "withdraw cash", "open an account", "ask about a loan",
             "pay a bill"),
    "library": ("borrow a book", "return {a:readable}", "study {field}"),
    "market": ("buy some {fruit:pl}", "buy {mass_food}", "sell {dish:pl}"),
    "bakery": ("buy bread", "buy some {baked:pl}"),
    "supermarket": ("buy {mass_food}", "buy some {fruit:pl}", "buy {drink}"),
    "hospital": ("see a doctor", "visit {poss} {kin}"),
    "pharmacy": ("buy some medicine",),
    "park": ("play {sport}", "walk {poss} dog", "feed the ducks", "fly a kite"),
    "school": ("teach {field}", "study {field}"),
    "university": ("study {field}", "learn {field}"),
    "office": ("work", "meet {poss} manager"),
    "station": ("catch a train", "meet {poss} {kin}"),
    "airport": ("catch a plane", "meet {poss} {kin}"),
    "museum": ("see the paintings", "look at the old {paper:pl}"),
    "zoo": ("see the {wild:pl}", "watch the {wild:pl}"),
    "gym": ("exercise", "play {sport}"),
    "pool": ("swim",),
    "shop": ("buy {a:color} {clothes}", "buy {a:thing}", "buy {a:toy}"),
    "store": ("buy {a:thing}", "buy {num:clothes}"),
    "mall": ("buy {a:clothes}", "meet {poss} friends"),
    "cinema": ("watch a movie", "see a film"),
    "theater": ("see a play",),
    "restaurant": ("eat {meal}", "eat {mass_food}", "have dinner"),
    "cafe": ("drink a cup of {drink}", "eat {a:dish}", "meet {poss} friends"),
    "beach": ("swim", "watch the sunset"),
    "farm": ("see the {farm:pl}", "feed the {farm:pl}", "help the farmer"),
    "stadium": ("watch a {sport} match",),
    "garden": ("plant {flower:pl}", "water the {flower:pl}"),
    "hotel": ("meet {poss} {kin}",),
    "factory": ("work",),
    "harbor": ("watch the ships", "watch the boats"),
    "bookstore": ("buy {a:readable}",),
    "gallery": ("see the paintings",),
    "clinic": ("see a doctor",),
}
