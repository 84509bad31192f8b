"""Math answers: extraction (:mod:`.extract`), equivalence (:mod:`.equivalence`) and our template problems (:mod:`.generator`)."""
