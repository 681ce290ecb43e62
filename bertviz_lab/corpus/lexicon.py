"""The small world's nouns, names, adjectives and adverbs, written by hand.

Each string is one category: the grammar only ever puts a word where its
category makes sense (pets sit on mats, ripe describes fruit, cities have
weather), which is the structure a small BERT is meant to discover. In noun
lists "mouse:mice" gives an irregular plural.
"""

# --- animals ---------------------------------------------------------------
PETS = "cat dog puppy kitten rabbit hamster parrot"
FARM_ANIMALS = "cow horse pig sheep:sheep goat duck chicken hen donkey lamb bull goose:geese"
WILD_ANIMALS = ("lion tiger elephant monkey giraffe zebra bear wolf:wolves fox deer:deer "
                "camel kangaroo panda snake")
WATER_ANIMALS = "fish:fish frog swan dolphin whale shark crab penguin otter beaver"
SMALL_ANIMALS = ("bird squirrel owl eagle crow pigeon bee ant butterfly spider beetle snail "
                 "hedgehog mouse:mice rat")

# What each animal eats, and the sound it makes: facts a model can pick up.
ANIMAL_FOOD = {
    "cat": "fish milk", "kitten": "milk fish", "dog": "bones meat", "puppy": "bones meat",
    "rabbit": "carrots lettuce", "hamster": "seeds nuts", "parrot": "seeds fruit",
    "cow": "grass hay", "horse": "hay carrots", "pig": "corn apples", "sheep": "grass hay",
    "goat": "grass leaves", "duck": "bread seeds", "chicken": "corn seeds", "hen": "corn seeds",
    "donkey": "hay carrots", "lamb": "grass", "bull": "grass hay", "goose": "grass bread",
    "lion": "meat", "tiger": "meat", "elephant": "leaves fruit", "monkey": "bananas fruit",
    "giraffe": "leaves", "zebra": "grass", "bear": "honey fish", "wolf": "meat", "fox": "mice",
    "deer": "grass leaves", "camel": "hay leaves", "kangaroo": "grass leaves",
    "panda": "bamboo", "snake": "mice", "fish": "worms", "frog": "insects", "swan": "bread",
    "dolphin": "fish", "whale": "fish", "shark": "fish", "crab": "worms", "penguin": "fish",
    "otter": "fish", "beaver": "leaves", "bird": "seeds worms", "squirrel": "nuts seeds",
    "owl": "mice", "eagle": "fish mice", "crow": "seeds bread", "pigeon": "bread seeds",
    "bee": "honey", "ant": "sugar", "butterfly": "fruit", "spider": "insects",
    "beetle": "leaves", "snail": "lettuce leaves", "hedgehog": "insects worms", "mouse": "cheese",
    "rat": "cheese bread",
}
ANIMAL_SOUNDS = {
    "bark": "dog puppy fox", "meow": "cat kitten", "purr": "cat kitten", "moo": "cow bull",
    "chirp": "bird", "roar": "lion tiger bear", "howl": "wolf dog", "buzz": "bee",
    "quack": "duck", "neigh": "horse", "hiss": "snake goose", "squeak": "mouse hamster rat",
    "hoot": "owl", "growl": "bear wolf dog", "bleat": "sheep goat lamb", "oink": "pig",
    "cluck": "chicken hen", "honk": "goose", "croak": "frog crow", "squawk": "parrot",
}
# Body parts one has one of (no plural here) and those one has two or more of.
ANIMAL_BODY = "tail nose head"
ANIMAL_PAIRS = "paw ear eye leg"

# --- people -----------------------------------------------------------------
MALE_NAMES = ("tom sam ben jack leo max paul mark john david peter james luke adam noah omar "
              "ali chen wei raj ivan carlos diego hugo felix oscar henry george kevin ryan")
FEMALE_NAMES = ("anna emma lily mia sara lucy kate amy grace ella nina maria sofia julia laura "
                "rose alice ruby zoe hana mei priya fatima olga elena clara ivy jane mary helen")
MEN = "man:men boy father brother son uncle grandfather husband king prince"
WOMEN = "woman:women girl mother sister daughter aunt grandmother wife:wives queen princess"
# Jobs and other roles of either gender; the story decides he or she when it introduces one.
JOBS = ("teacher doctor nurse farmer driver cook chef baker artist writer singer dancer pilot "
        "officer soldier scientist engineer programmer lawyer judge clerk cashier teller waiter "
        "coach dentist painter musician gardener librarian mechanic manager guard sailor poet "
        "reporter actor photographer")
OTHER_ROLES = ("student player tourist neighbor stranger customer passenger worker "
               "child:children baby kid parent cousin classmate visitor traveler fan friend "
               "person:people")
KIN = "mother father sister brother friend cousin aunt uncle grandmother grandfather neighbor"
HUMAN_BODY = "head nose face"
HUMAN_PAIRS = "hand ear eye leg foot:feet arm finger"

# --- things -----------------------------------------------------------------
# Things one sits on: furniture one can count, and places that come one at a time.
SEATS = ("mat rug chair sofa bench bed couch stool carpet cushion pillow blanket box table "
         "towel seat")
FIXED_SEATS = "floor step wall fence rock log windowsill roof porch doorstep"
ROOMS = "kitchen bedroom bathroom garage hall attic basement yard garden room apartment"
KITCHENWARE = "cup plate bowl glass spoon fork knife:knives pan pot kettle bottle jar tray"
THINGS = ("lamp clock mirror phone computer laptop camera radio key bag box basket umbrella "
          "wallet watch ring candle vase brush comb bucket ladder hammer rope backpack "
          "flashlight")
PAPERS = ("book notebook pen pencil letter newspaper magazine map ticket card picture photo "
          "painting postcard")
READABLE = "book newspaper magazine letter postcard"
FLOWER_COLORS = "red yellow white pink purple orange blue"
LEAF_COLORS = "red yellow brown orange golden"
BAKED = "cake pie muffin cookie biscuit"
TOYS = "toy ball kite doll puzzle balloon robot"
OPENABLES = "door window box bag book drawer gate"
CLOTHES = ("shirt coat jacket hat cap scarf:scarves dress skirt sweater sock shoe boot glove "
           "belt tie raincoat")
ROAD_VEHICLES = "car bus bike bicycle taxi truck van tram motorcycle scooter"
TRIP_VEHICLES = "train plane bus boat ship"
RIDES = "bike bicycle motorcycle scooter horse"
INSTRUMENTS = "piano guitar violin drum flute trumpet cello harp"
SPORTS = ("football soccer tennis basketball baseball cricket chess golf hockey volleyball "
          "badminton rugby")
# Companies are names (no article), and a device is what they release.
COMPANIES = "apple google microsoft samsung sony nokia intel nintendo"
DEVICES = "phone laptop tablet watch camera computer speaker console chip robot printer device"

# --- food -------------------------------------------------------------------
FRUIT = ("apple banana orange pear peach plum grape cherry lemon mango:mangoes strawberry "
         "melon watermelon")
DISHES = ("sandwich cookie cake pie pizza burger sausage biscuit muffin pancake dumpling "
          "egg carrot potato:potatoes tomato:tomatoes onion cucumber peanut")
MASS_FOOD = ("bread rice soup cheese butter pasta meat chocolate honey cereal yogurt jam "
             "porridge curry sushi tofu beef salad popcorn")
DRINKS = "tea coffee milk juice water lemonade cocoa soda"
MEALS = "breakfast lunch dinner"

# --- places -----------------------------------------------------------------
NATURE = ("river lake sea forest hill mountain valley field meadow beach island desert cave "
          "pond stream waterfall shore path road street bridge village jungle")
CITIES = {
    "beijing": "china", "shanghai": "china", "paris": "france", "lyon": "france",
    "london": "england", "manchester": "england", "tokyo": "japan", "kyoto": "japan",
    "osaka": "japan", "berlin": "germany", "munich": "germany", "rome": "italy",
    "milan": "italy", "venice": "italy", "madrid": "spain", "barcelona": "spain",
    "moscow": "russia", "cairo": "egypt", "delhi": "india", "mumbai": "india",
    "seoul": "korea", "sydney": "australia", "melbourne": "australia",
    "toronto": "canada", "vancouver": "canada", "chicago": "america", "boston": "america",
    "seattle": "america", "miami": "america", "dublin": "ireland", "vienna": "austria",
    "prague": "czechia", "oslo": "norway", "stockholm": "sweden", "lisbon": "portugal",
    "athens": "greece", "istanbul": "turkey", "bangkok": "thailand", "nairobi": "kenya",
    "lagos": "nigeria", "lima": "peru", "amsterdam": "the netherlands", "warsaw": "poland",
    "budapest": "hungary", "helsinki": "finland", "copenhagen": "denmark", "zurich": "switzerland",
    "geneva": "switzerland", "hanoi": "vietnam", "manila": "the philippines",
    "jakarta": "indonesia",
    "singapore": "singapore", "auckland": "new zealand", "havana": "cuba",
}

FIELDS = ("natural language processing", "machine learning", "deep learning", "computer vision",
          "mathematics", "physics", "chemistry", "biology", "history", "music", "art",
          "geography", "literature", "linguistics", "economics", "philosophy", "astronomy",
          "statistics", "robotics", "programming", "poetry", "medicine", "law")
TREES = "tree oak pine maple willow birch palm"
FLOWERS = "flower rose tulip daisy sunflower lily violet"
WEATHER_MASS = "rain snow wind fog thunder lightning hail frost sunshine"

# --- describing words -------------------------------------------------------
FEELINGS = ("happy sad tired hungry thirsty sleepy angry scared brave calm curious excited "
            "nervous bored cheerful lonely proud shy sick busy worried surprised relaxed grumpy")
ANIMAL_TRAITS = ("big small little tiny huge old young friendly clever lazy gentle wild fast "
                 "slow strong tall fat thin cute beautiful funny noisy playful fluffy hairy")
PERSON_TRAITS = "kind polite patient honest smart quiet tall young old funny clever strong"
THING_TRAITS = ("big small old new heavy light broken clean dirty empty full cheap expensive "
                "shiny round soft hard long short wooden plastic useful strange simple")
FOOD_TRAITS = ("delicious tasty sweet sour salty spicy fresh ripe hot cold warm crunchy soft "
               "juicy bitter bland stale creamy")
# The sky and the temperature are separate so "sunny and cold" can never be "dry and snowy".
SKY_TRAITS = "sunny rainy cloudy windy snowy foggy stormy humid dry wet clear grey bright dark"
TEMPERATURE_TRAITS = "cold hot warm cool chilly freezing mild"
NICE_WEATHER = "pleasant lovely nice beautiful"
DRY_TRAITS = "sunny dry clear bright warm hot"
PLACE_TRAITS = ("busy quiet crowded empty noisy peaceful famous beautiful old new modern small "
                "large big huge open closed clean")
WATER_TRAITS = "calm cold clear warm deep dark still"
CITY_TRAITS = "busy quiet crowded noisy peaceful famous beautiful old modern small large big huge"
DEVICE_TRAITS = "new thin fast light expensive cheap powerful smart small large modern popular"
COLORS = "red blue green yellow black white brown pink purple orange grey golden silver"

# --- adverbs and time -------------------------------------------------------
MANNER = ("quickly slowly quietly loudly happily sadly carefully gently softly suddenly calmly "
          "proudly politely patiently nervously lazily angrily bravely eagerly")
HABIT = "often always sometimes usually rarely never"
DAYS = "monday tuesday wednesday thursday friday saturday sunday"
MONTHS = ("january february march april may june july august september october november "
          "december")
SEASONS = "spring summer autumn winter"
DAY_PARTS = "morning afternoon evening"
NUMBERS = "two three four five six seven eight nine ten eleven twelve twenty"
