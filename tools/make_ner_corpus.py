#!/usr/bin/env python3
"""Generates the small synthetic Chinese NER corpus of examples/data.

Sentences come from templates with slots for five entity types (name, address, company,
organization, position), filled from lists of made-up people, places, companies and
titles. The output is CLUENER's JSON-lines layout:

    {"text": "...", "label": {type: {entity: [[start, end], ...]}}}

with code-point indices and inclusive ends. Deterministic for a given --seed.

    python3 tools/make_ner_corpus.py --out examples/data
"""

import argparse
import json
import os
import random

SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蒋蔡余杜叶程苏魏吕丁")
GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红建文辉力兰宁斌健飞鹏波宇浩凯晨欣怡佳琳雪梅春雨婷嘉鑫")
CITIES = ["北京", "上海", "广州", "深圳", "杭州", "南京", "成都", "武汉", "西安", "重庆", "天津", "苏州",
          "长沙", "郑州", "青岛", "厦门", "昆明", "大连", "沈阳", "济南", "合肥", "福州", "南昌", "贵阳",
          "兰州", "太原", "宁波", "无锡", "珠海", "温州"]
DISTRICTS = ["朝阳", "海淀", "浦东", "天河", "南山", "西湖", "鼓楼", "武侯", "江汉", "雁塔", "渝中", "和平"]
ROADS = ["人民", "解放", "中山", "建设", "长江", "黄河", "新华", "光明", "友谊", "和平", "东风", "滨江"]
BRAND = list("华鼎盛远星辰恒信达通海天宏泰新锐博创金银鸿运瑞丰腾飞安康智云汇昌润凯")
COMPANY_SUFFIX = ["科技有限公司", "集团", "银行", "证券", "传媒", "电子", "汽车", "食品有限公司", "航空",
                  "地产", "保险", "物流"]
ORG_SUFFIX = ["大学", "第一中学", "足球俱乐部", "篮球队", "红十字会", "作家协会", "研究所", "交响乐团",
              "医学院", "博物馆"]
POSITIONS = ["总经理", "董事长", "教授", "记者", "主任", "市长", "工程师", "医生", "教练", "律师",
             "会计师", "首席执行官", "副总裁", "院长", "校长", "主编", "研究员", "设计师", "队长",
             "秘书长", "分析师", "厂长", "编辑", "导演"]

# {n}: name, {a}: address, {c}: company, {o}: organization, {p}: position.
TEMPLATES = [
    "{n}是{c}的{p}。",
    "{n}在{a}担任{c}{p}。",
    "{c}{p}{n}昨天来到{a}考察。",
    "据{o}介绍，{n}将出任{p}。",
    "{n}毕业于{o}，现任{c}{p}。",
    "记者在{a}见到了{n}。",
    "{c}宣布在{a}设立新的分部。",
    "{o}的{p}{n}表示，明年将扩大招生。",
    "{n}和{n2}一起去{a}参观了{o}。",
    "今年{c}的营收增长了两成，{p}{n}很满意。",
    "{a}的市民对{c}的服务评价很高。",
    "{n}说：“{o}是我最喜欢的地方。”",
    "{p}{n}与{c}签订了合作协议。",
    "{o}在{a}举办了年度活动，{n}出席。",
    "昨天，{n}辞去了{c}{p}一职。",
    "{c}和{c2}在{a}联合发布新产品。",
    "{n}曾在{o}工作多年，后来成为{p}。",
    "{a}将新建一座{o}。",
    "{n}的父亲是{a}一家工厂的{p}。",
    "{c}总部位于{a}。",
    "{n}认为{c}的前景很好。",
    "{o}聘请{n}为名誉{p}。",
    "{n}从{a}出发，前往{a2}。",
    "{c}{p}{n}接受了采访。",
    "{n}是{o}的{p}，也是{n2}的老师。",
    "{n}在{a}遇到了{n}的老朋友。",
    "{o}与{c}达成了长期合作。",
    "{p}{n}今天上午抵达{a}。",
]
EMPTY = ["今天天气很好，适合出门散步。", "这部电影讲述了一个感人的故事。", "他们决定周末一起去爬山。",
         "会议将在下午三点开始。", "这家餐厅的菜味道不错。", "孩子们在操场上踢足球。",
         "大家都在等待最新的消息。", "春天来了，花都开了。"]


def name(rng):
    return rng.choice(SURNAMES) + "".join(rng.choice(GIVEN) for _ in range(rng.choice([1, 2, 2])))


def address(rng):
    city = rng.choice(CITIES)
    form = rng.random()
    if form < 0.5:
        return city
    if form < 0.75:
        return city + rng.choice(DISTRICTS) + "区"
    return city + rng.choice(ROADS) + "路" + str(rng.randint(1, 300)) + "号"


def company(rng):
    brand = rng.choice(BRAND) + rng.choice(BRAND)
    prefix = rng.choice(CITIES) if rng.random() < 0.3 else ""
    return prefix + brand + rng.choice(COMPANY_SUFFIX)


def organization(rng):
    if rng.random() < 0.2:
        return rng.choice(BRAND) + rng.choice(BRAND) + "基金会"
    return rng.choice(CITIES) + rng.choice(ORG_SUFFIX)


MAKERS = {"n": ("name", name), "n2": ("name", name), "a": ("address", address), "a2": ("address", address),
          "c": ("company", company), "c2": ("company", company), "o": ("organization", organization),
          "p": ("position", lambda rng: rng.choice(POSITIONS))}


def fill(template, rng):
    """Fills a template; returns (text, labels) with code-point spans."""
    values = {}
    text, labels, i = "", {}, 0
    while i < len(template):
        if template[i] == "{":
            j = template.index("}", i)
            slot = template[i + 1:j]
            label, make = MAKERS[slot]
            if slot not in values:
                values[slot] = make(rng)
            entity = values[slot]
            start = len(text)
            text += entity
            labels.setdefault(label, {}).setdefault(entity, []).append([start, len(text) - 1])
            i = j + 1
        else:
            text += template[i]
            i += 1
    return text, labels


def sentences(rng, count, seen):
    out = []
    while len(out) < count:
        if rng.random() < 0.05:
            text, labels = rng.choice(EMPTY), {}
        else:
            text, labels = fill(rng.choice(TEMPLATES), rng)
        if text in seen or len(text) > 50:
            continue
        if not labels and any(r["text"] == text for r in out):
            continue
        seen.add(text)
        for entities in labels.values():
            for entity, spans in entities.items():
                for s, e in spans:
                    assert text[s:e + 1] == entity
        out.append({"text": text, "label": labels})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="examples/data")
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--dev", type=int, default=200)
    ap.add_argument("--seed", type=int, default=20240601)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seen = set()
    train = sentences(rng, args.train, seen)
    dev = sentences(rng, args.dev, seen)
    os.makedirs(args.out, exist_ok=True)
    for split, records in (("train", train), ("dev", dev)):
        path = os.path.join(args.out, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
        mentions = sum(len(s) for ents in (r["label"] for r in records) for spans in ents.values() for s in spans.values())
        print(f"{path}: {len(records)} records, {mentions} mentions, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
